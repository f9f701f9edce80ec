//! `pir-bench`: the measurements behind `pir bench`. Work in progress.
