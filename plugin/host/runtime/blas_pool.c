/* Keeps OpenBLAS from starting its own thread pool when the program loads.
 *
 * OpenBLAS (Debian's pthread build, loaded through libknnwb and igraph's libblas.so.3) starts one
 * thread per core but one from its library constructor, before main, each with a stack of
 * RLIMIT_STACK bytes. Where those do not fit (many cores under a tight `ulimit -v`, or a large
 * `ulimit -s`) pthread_create fails and OpenBLAS ends the process before knnwb runs: nothing knnwb
 * does in main can help. knnwb never uses that pool: its GEMMs run on its own threads with
 * OpenBLAS set to one thread (core/cpu/select_cpu.c), which is also what keeps concurrent calls safe.
 *
 * The ways to stop the pool were weighed: OPENBLAS_NUM_THREADS=1 set from inside the program is
 * too late for a constructor, and an early setenv (in .preinit_array, which runs before any
 * library's constructor) is lost when libc's own initialisation sets environ again; re-executing
 * the program with the variable set cannot help either, since the first process dies in the
 * constructor; loading OpenBLAS later with dlopen is impossible while igraph links libblas.so.3;
 * the serial OpenBLAS is a system-wide alternative, not a choice of the program. What OpenBLAS
 * does read in its constructor is the number of usable cores (sched_getaffinity). So a
 * .preinit_array function of the executable narrows the process's CPU affinity to one of its
 * cores while the libraries initialise (OpenBLAS then starts no thread), and a constructor of the
 * executable, which runs after every library's, puts the affinity back before main: knnwb's own
 * threads see every core. The cost: libraries that size themselves from the affinity at load time
 * see one core (OpenBLAS, and libgomp's default OpenMP team, which knnwb does not use).
 *
 * Only system calls run this early (libc is not initialised yet). Nothing changes where the
 * affinity cannot be read (over CPU_SETSIZE cores) or set, or when OPENBLAS_NUM_THREADS is set
 * (the user's explicit choice for OpenBLAS's pool is honoured).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stddef.h>

static cpu_set_t knnwb_blas_pool_saved_affinity;
static const char knnwb_blas_pool_variable[] = "OPENBLAS_NUM_THREADS=";
static int knnwb_blas_pool_narrowed;

static void knnwb_blas_pool_narrow(int argc, char **argv, char **envp)
{
  (void)argc, (void)argv;
  for (char **variable = envp; variable != NULL && *variable != NULL; variable++) {
    size_t i = 0; /* by hand: no libc string function this early (interceptors, IFUNCs) */
    while (knnwb_blas_pool_variable[i] != '\0' && (*variable)[i] == knnwb_blas_pool_variable[i])
      i++;
    if (knnwb_blas_pool_variable[i] == '\0')
      return;
  }
  if (sched_getaffinity(0, sizeof knnwb_blas_pool_saved_affinity,
                        &knnwb_blas_pool_saved_affinity) != 0 ||
      CPU_COUNT(&knnwb_blas_pool_saved_affinity) < 2)
    return;
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, &knnwb_blas_pool_saved_affinity)) {
      CPU_SET(cpu, &one);
      break;
    }
  if (sched_setaffinity(0, sizeof one, &one) == 0)
    knnwb_blas_pool_narrowed = 1;
}

__attribute__((constructor)) static void knnwb_blas_pool_restore(void)
{
  if (knnwb_blas_pool_narrowed)
    sched_setaffinity(0, sizeof knnwb_blas_pool_saved_affinity, &knnwb_blas_pool_saved_affinity);
  knnwb_blas_pool_narrowed = 0;
}

/* The dynamic loader calls .preinit_array entries of the executable before any library's
 * constructor (ELF gABI; glibc's _dl_init). */
__attribute__((section(".preinit_array"), used)) static void (*const knnwb_blas_pool_preinit)(
    int, char **, char **) = knnwb_blas_pool_narrow;
