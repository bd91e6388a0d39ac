// Package layering holds the test that keeps DESIGN.md's layering sentence true: "A
// package imports only what stands to its left in that line, plus quant, config and
// sdk. Nothing in core imports plugins/". It has no code of its own.
package layering
