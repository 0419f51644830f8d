/* The `knnwb` commands main() dispatches to that are not workflow commands (those are declared in
 * options.h). Each takes the command's own argv (argv[0] is the command's name) and returns the
 * process's exit status: 0; 1 when the input or the run fails; 2 on a usage error; 128 + signal
 * when interrupted. */
#ifndef KNNWB_HOST_COMMANDS_H
#define KNNWB_HOST_COMMANDS_H

#include <glib.h>

G_BEGIN_DECLS

int knnwb_host_command_knn(int argc, char **argv);
int knnwb_host_command_cluster(int argc, char **argv);
int knnwb_host_command_run(int argc, char **argv);
int knnwb_host_command_validate(int argc, char **argv);
int knnwb_host_command_plugins(int argc, char **argv);

G_END_DECLS

#endif
