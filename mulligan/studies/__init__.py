"""Studies over the runner: strategies side by side (`study`), transfer from a learning split
(`transfer`), verification of lessons (`verify`) and the offline demo (`demo`)."""
