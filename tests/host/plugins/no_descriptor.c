/* A shared module that is not a knnwb plugin (no descriptor symbol). */
#include <gmodule.h>

G_MODULE_EXPORT int test_something_else(void);
G_MODULE_EXPORT int test_something_else(void)
{
  return 42;
}
