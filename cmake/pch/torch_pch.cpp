// The translation unit that carries the precompiled <torch/types.h> of the library targets
// (cmake/RunnerPch.cmake); it defines nothing.
