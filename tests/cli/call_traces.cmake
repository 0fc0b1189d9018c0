# Call traces recorded by the Python module (sim/trace/call_trace.h; docs/sglang.md "Record the
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
# A windowed recording (record_window=20, page_size 4: page hashes): its last two segments,
# each starting with a tree snapshot. Segment 3 ends in the unlock of a lock taken in segment 0
# whose node was evicted since; segment 2 is clean. bad_snapshot.calls.jsonl is segment 2 with
# a node's parent changed to one the snapshot lacks.
kvsim_cli_test(calls_replay_window_segment 0 "segment 2 of a windowed recording.*restored its snapshot of 9 nodes"
               ${_kvsim} replay ${_calls}/window-crash.seg000002.jsonl)
kvsim_cli_test(calls_replay_window_crash 1 "replay matches the recording"
               ${_kvsim} replay ${_calls}/window-crash.seg000003.jsonl)
kvsim_cli_test(calls_shrink_window_crash 0 "shrunk 4 calls to 1 .*still fails with core.assert.*vanished"
               ${_kvsim} shrink ${_calls}/window-crash.seg000003.jsonl --out ${CMAKE_CURRENT_BINARY_DIR}/window-crash.min.out.calls.jsonl)
kvsim_cli_test(calls_bad_snapshot 2 "bad_snapshot.calls.jsonl:4: snapshot: node 5: field parent: no node 99 in the snapshot"
               ${_kvsim} replay ${_calls}/bad_snapshot.calls.jsonl)
