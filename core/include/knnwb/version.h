/* Library version. */
#ifndef KNNWB_VERSION_H
#define KNNWB_VERSION_H

#define KNNWB_VERSION_MAJOR 0
#define KNNWB_VERSION_MINOR 1
#define KNNWB_VERSION_MICRO 0
#define KNNWB_VERSION_STRING "0.1.0"

/** The version of the library actually linked (may differ from the header's). */
const char *knnwb_version(void);

#endif
