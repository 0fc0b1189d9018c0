"""Stand-in for SGLang (kvsim tests only): the few names kvsim.sglang uses."""
