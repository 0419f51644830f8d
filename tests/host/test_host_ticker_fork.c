/* A ticker (the "label: 12 s" line drawn from a thread of its own) and fork(): no child is forked
 * while the ticker's thread draws, since the child would inherit the locks that thread holds then
 * (an allocator's: the child of `knnwb cluster --method leiden` hung on its first malloc under
 * ASan). The test holds the ticker inside its first redraw, forks from another thread, then lets
 * the redraw end: the child must see the redraw finished. */
#include <pty.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "runtime/runtime.h"

static int entered[2], go[2];
static volatile int in_redraw;
static gboolean held_once;

/* The first redraw: says so, then waits for the test's go. */
static void hold_first_redraw(void)
{
  if (held_once)
    return;
  held_once = TRUE;
  in_redraw = 1;
  char byte = 'e';
  g_assert_cmpint(write(entered[1], &byte, 1), ==, 1);
  g_assert_cmpint(read(go[0], &byte, 1), ==, 1);
  in_redraw = 0;
}

/* Forks; the child's exit status is 1 when it was forked inside the redraw. Returns the status. */
static gpointer fork_and_wait(gpointer data)
{
  (void)data;
  pid_t child = fork();
  if (child == 0)
    _exit(in_redraw ? 1 : 0);
  int status = -1;
  g_assert_cmpint(waitpid(child, &status, 0), ==, child);
  return GINT_TO_POINTER(status);
}

static void test_no_fork_inside_a_redraw(void)
{
  /* The ticker draws only on a terminal: stderr becomes a pseudo-terminal's (its master is read
   * by nobody; a few short lines fit its buffer). */
  int master = -1, slave = -1;
  struct winsize size = {.ws_row = 24, .ws_col = 80};
  g_assert_cmpint(openpty(&master, &slave, NULL, NULL, &size), ==, 0);
  int saved_stderr = dup(STDERR_FILENO);
  g_assert_cmpint(dup2(slave, STDERR_FILENO), ==, STDERR_FILENO);
  g_assert_cmpint(pipe(entered), ==, 0);
  g_assert_cmpint(pipe(go), ==, 0);
  knnwb_host_ticker_draw_hook = hold_first_redraw;

  KnnwbHostTicker *ticker = knnwb_host_ticker_new("work", FALSE);
  g_assert_nonnull(ticker);
  char byte = 0;
  g_assert_cmpint(read(entered[0], &byte, 1), ==, 1); /* the first redraw, half a second in */
  GThread *forker = g_thread_new("forker", fork_and_wait, NULL);
  /* Give the forker time to reach fork() while the redraw is held (were it later, the check
   * below would pass without testing anything, never fail wrongly). */
  g_usleep(G_USEC_PER_SEC / 5);
  byte = 'g';
  g_assert_cmpint(write(go[1], &byte, 1), ==, 1);
  int status = GPOINTER_TO_INT(g_thread_join(forker));
  knnwb_host_ticker_free(ticker);
  knnwb_host_ticker_draw_hook = NULL;

  g_assert_cmpint(dup2(saved_stderr, STDERR_FILENO), ==, STDERR_FILENO);
  close(saved_stderr);
  close(slave);
  close(master);
  g_assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) != 0)
    g_error("a child was forked while the ticker's thread was drawing");
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/host/ticker/no-fork-inside-a-redraw", test_no_fork_inside_a_redraw);
  return g_test_run();
}
