//! Paths and files for untrusted input (being built).
