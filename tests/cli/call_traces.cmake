# Call traces recorded by the Python module (sim/call_trace.h; docs/sglang.md "Record the
# calls, replay a crash"): replay, shrink and bad input, without needing Python.
# tests/data/calls/crash.calls.jsonl (+ its .bin sidecar) was recorded by the module: 46 calls
# ending in an unlock of a lock whose node was evicted; crash.min.calls.jsonl is its shrink.
set(_calls ${_data}/calls)
kvsim_cli_test(calls_replay_recording 1 "replay matches the recording"
               ${_kvsim} replay ${_calls}/crash.calls.jsonl)
kvsim_cli_test(calls_replay_shrunk 1 "replay matches the recording"
               ${_kvsim} replay ${_calls}/crash.min.calls.jsonl)
kvsim_cli_test(calls_shrink 0 "shrunk 46 calls to 6 .*still fails with core.assert"
               ${_kvsim} shrink ${_calls}/crash.calls.jsonl --out ${CMAKE_CURRENT_BINARY_DIR}/crash.min.out.calls.jsonl)
kvsim_cli_test(calls_bad_reference 2 "bad_ref.calls.jsonl:3: field of: 5 is out of range"
               ${_kvsim} replay ${_calls}/bad_ref.calls.jsonl)
kvsim_cli_test(calls_bad_sidecar_range 2 "bad_blob.calls.jsonl:2: field tok: range beyond the end of the sidecar"
               ${_kvsim} replay ${_calls}/bad_blob.calls.jsonl)
