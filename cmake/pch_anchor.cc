// Anchor translation unit that owns the shared LibTorch precompiled header.
