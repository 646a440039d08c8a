// Stands for a module the write path requires but never calls here.
