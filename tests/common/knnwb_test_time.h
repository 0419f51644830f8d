/* Time bounds in tests. A test asserts a behaviour (the run stopped, nothing was committed, the
 * temporaries are gone); a bound on the seconds that took only separates "stopped" from "went on
 * to the end" or "hung", so it is generous (several times the promise) and scaled for builds and
 * machines that are slower: sanitizer builds (several times slower) and KNNWB_TEST_TIME_SCALE (a
 * factor of 1 or more, for a loaded or emulated machine). How fast knnwb stops is measured by the
 * benchmarks, never asserted here: on the 2-core CI machine under load a run of 1.02-1.35 s failed
 * a bound of one second. */
#ifndef KNNWB_TEST_TIME_H
#define KNNWB_TEST_TIME_H

#include <glib.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KNNWB_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define KNNWB_TEST_SANITIZED 1
#endif
#endif

/* How much slower than a normal build this test program may run. */
static inline double knnwb_test_time_scale(void)
{
  double scale = 1.0;
#ifdef KNNWB_TEST_SANITIZED
  scale = 4.0;
#endif
  const char *text = g_getenv("KNNWB_TEST_TIME_SCALE");
  double asked = text != NULL ? g_ascii_strtod(text, NULL) : 0.0;
  if (asked > 1.0)
    scale *= asked;
  return scale;
}

/* The bound for something a normal build on an idle machine does well within seconds. */
static inline double knnwb_test_seconds(double seconds)
{
  return seconds * knnwb_test_time_scale();
}

/* The same in microseconds (g_get_monotonic_time's unit). */
static inline gint64 knnwb_test_usec(double seconds)
{
  return (gint64)(knnwb_test_seconds(seconds) * G_USEC_PER_SEC);
}

#endif
