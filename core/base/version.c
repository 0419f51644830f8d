/* The linked library's version. */
#include <knnwb/version.h>

const char *knnwb_version(void)
{
  return KNNWB_VERSION_STRING;
}
