/*
 * The rank's connection to its launcher's PMIx server, made without delay.
 *
 * Open MPI 4.1's ranks talk to the PMIx server of their host (mpirun, or the orted of a remote
 * host) over a TCP loopback connection that PMIx opens without TCP_NODELAY. MPI_Finalize sends a
 * row of small requests on it, each of which waits for no answer: Nagle's algorithm holds the
 * second one until the server acknowledges the first, and the server's kernel delays that
 * acknowledgement by its 40 ms minimum (nothing goes back to carry it). So every rank's
 * MPI_Finalize took 43-49 ms, almost all of it this wait (strace: the server read the ranks'
 * requests 41 ms after they were written); with TCP_NODELAY on the rank's end, 3-5 ms. On the
 * 2-core VM that was a third of a 2-rank job's fixed cost (the MPI CPU scaling check).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include "distributed_internal.h"

/* The server's TCP port from the URI PMIx gives its clients ("<namespace>.<rank>;tcp4://127.0.0.1:
 * 38919", tcp6 with the address in brackets), 0 when there is none or it is not TCP. */
static int knnwb_distributed_launcher_port(void)
{
  static const char *const names[] = {"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
                                      "PMIX_SERVER_URI21", "PMIX_SERVER_URI2"};
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    const char *uri = g_getenv(names[i]);
    const char *scheme = uri != NULL ? strstr(uri, ";tcp") : NULL;
    const char *colon = scheme != NULL ? strrchr(scheme, ':') : NULL;
    if (colon == NULL || strstr(scheme, "://") == NULL || colon < strstr(scheme, "://") + 3)
      continue;
    char *end = NULL;
    errno = 0;
    const long port = strtol(colon + 1, &end, 10);
    if (errno == 0 && end != colon + 1 && *end == '\0' && port > 0 && port < 65536)
      return (int)port;
  }
  return 0;
}

/* The peer's TCP port of fd, 0 when fd is not a TCP socket. */
static int knnwb_distributed_peer_port(int fd)
{
  int type = 0;
  socklen_t length = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM)
    return 0;
  struct sockaddr_storage peer;
  length = sizeof peer;
  if (getpeername(fd, (struct sockaddr *)&peer, &length) != 0)
    return 0;
  if (peer.ss_family == AF_INET)
    return ntohs(((const struct sockaddr_in *)&peer)->sin_port);
  if (peer.ss_family == AF_INET6)
    return ntohs(((const struct sockaddr_in6 *)&peer)->sin6_port);
  return 0;
}

int knnwb_distributed_launcher_nodelay(int rank)
{
  const int port = knnwb_distributed_launcher_port();
  if (port == 0)
    return 0;
  /* The descriptors open now: /proc/self/fd where there is one, else the first 1024. */
  g_autoptr(GArray) fds = g_array_new(FALSE, FALSE, sizeof(int));
  g_autoptr(GDir) dir = g_dir_open("/proc/self/fd", 0, NULL);
  if (dir != NULL) {
    for (const char *name; (name = g_dir_read_name(dir)) != NULL;) {
      const int fd = atoi(name);
      g_array_append_val(fds, fd);
    }
  } else {
    for (int fd = 0; fd < 1024; fd++)
      g_array_append_val(fds, fd);
  }
  int set = 0;
  for (guint i = 0; i < fds->len; i++) {
    const int fd = g_array_index(fds, int, i), one = 1;
    if (knnwb_distributed_peer_port(fd) != port)
      continue;
    int on = 0;
    socklen_t length = sizeof on;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0 &&
        getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &length) == 0 && on)
      set++;
  }
  g_debug("knnwb: rank %d: TCP_NODELAY on %d connection(s) to the PMIx server (port %d)", rank, set,
          port);
  return set;
}
