//! Matrix-vector products mod 2^32 for the lattice schemes (pir-lattice). Work in progress.
