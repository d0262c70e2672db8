"""One adapter per external system; SDK errors are translated here, once."""
