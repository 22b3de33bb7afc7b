// atol = 1 in a comment
const double atol = 1e-3;
