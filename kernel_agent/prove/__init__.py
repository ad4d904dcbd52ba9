"""Winners that prove themselves where they are used (DESIGN.md section 17): a package's certificates checked and
measured again on this machine (`verify-package`), and its kernels swapped into a model (`e2e`)."""
