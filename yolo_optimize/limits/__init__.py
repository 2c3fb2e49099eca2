"""This machine's measured limits (``optimize info``): peak GEMM and convolution rates per runtime and precision,
and memory bandwidth."""
