// Owner translation unit of the LibTorch precompiled header (see CKTorch.cmake).
