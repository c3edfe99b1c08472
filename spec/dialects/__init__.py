"""One module per spec language, each compiling loaded YAML to a Plan."""
