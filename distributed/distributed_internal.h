/* Shared by the MPI files of distributed/. */
#ifndef KNNWB_DISTRIBUTED_INTERNAL_H
#define KNNWB_DISTRIBUTED_INTERNAL_H

#include <mpi.h>

/** The job's communicator (a duplicate of MPI_COMM_WORLD), MPI_COMM_NULL when alone. */
MPI_Comm knnwb_distributed_communicator(void);

#endif
