# tests/mpi/mpi.mk: `make mpi-test` builds with MPI=1 (installing Open MPI
# when missing, like Criterion) and runs tests/mpi/test_mpi.sh: training
# under mpirun gives the bits of one process's team.  Not part of `make
# test`, which needs no MPI.
.PHONY: mpi-test
mpi-test: check-mpi
	$(MAKE) MPI=1 $(BUILD)/gpt $(BUILD)/gpt-mpi $(BUILD)/translate $(BUILD)/translate-mpi
	bash tests/mpi/test_mpi.sh $(BUILD)
