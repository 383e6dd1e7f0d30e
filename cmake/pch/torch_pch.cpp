// The translation unit that carries the precompiled <torch/types.h> of both hosts in
// cmake/RunnerPch.cmake (a library object and an executable, which needs a main).
int main() { return 0; }
