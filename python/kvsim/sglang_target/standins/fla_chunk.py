"""sglang.srt.layers.attention.fla.chunk_delta_h: the FLA kernels' chunk size, the one name the
cache modules read of it (ServerArgs.mamba_cache_chunk_size, MambaRadixCache's messages). The
kernels themselves are not emulated."""

CHUNK_SIZE = 64
