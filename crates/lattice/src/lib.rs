//! `pir-lattice`: single-server lattice PIR (SimplePIR, DoublePIR). Work in progress.
