"""The kernel-table generator (gen/generate.py, gen/pte_operators.py and gen/ops/*.toml), installed with the
package so that `etrt selective` can write a kernel table for C++ embedding without the source checkout."""
