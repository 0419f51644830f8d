/* One table of names per enum: parsing, printing, choice lists for step descriptors, help texts
 * and error messages all come from it.
 *
 * An enum's names are written once, as a list macro in the enum's own header:
 *
 *   #define KNNWB_SCREEN_NAMES(X) X(KNNWB_SCREEN_AUTO, "auto") X(KNNWB_SCREEN_FP32, "fp32") ...
 *
 * in the order help texts and messages show them. The owning module builds its table from it
 * (KNNWB_ENUM_ENTRY) and step descriptors, which need a constant, take KNNWB_ENUM_CHOICES. */
#ifndef KNNWB_ENUM_NAMES_H
#define KNNWB_ENUM_NAMES_H

#include <glib.h>

G_BEGIN_DECLS

/** One accepted name and the enum value it stands for. */
typedef struct {
  const char *name;
  int value;
} KnnwbEnumName;

/** An enum's names and how an unknown one is reported:
 * `before 'NAME' between a, b or c after` (the list joined as last_separator says). */
typedef struct {
  const KnnwbEnumName *names; /**< the listed names, then aliases (accepted, never listed) */
  size_t n_names;             /**< all of them */
  size_t n_listed;            /**< the first n_listed are listed and printed */
  const char *last_separator; /**< between the last two names of the message: " or " or ", " */
  const char *before, *between, *after;
  const char *null_name; /**< printed for a NULL name */
} KnnwbEnumTable;

/** A table over a static array of names whose last n_aliases entries are aliases. */
/* clang-format off */
#define KNNWB_ENUM_TABLE(names, n_aliases, last_separator, before, between, after, null_name)      \
  {(names), G_N_ELEMENTS(names), G_N_ELEMENTS(names) - (n_aliases), (last_separator),             \
   (before), (between), (after), (null_name)}
/* clang-format on */

/** A list macro's entries as KnnwbEnumName initializers, `{LIST(KNNWB_ENUM_ENTRY)}`. */
#define KNNWB_ENUM_ENTRY(value, name) {(name), (int)(value)},
/** A list macro's names as the constant "a|b|c" (KnnwbParamSpec.choices): "|a|b|c" past its first
 * bar. */
#define KNNWB_ENUM_CHOICES(list) (&(list(KNNWB_ENUM_BAR_NAME))[1])
#define KNNWB_ENUM_BAR_NAME(value, name) "|" name
/** A list macro's names as the constant " a b c", to end a constant text. */
#define KNNWB_ENUM_SPACED(list) list(KNNWB_ENUM_SPACED_NAME)
#define KNNWB_ENUM_SPACED_NAME(value, name) " " name

/**
 * Looks name up (ASCII case-insensitive, aliases included) and stores its value. Errors:
 * KNNWB_ERROR_INVALID_ARGUMENT with the table's message listing every listed name. O(names).
 */
gboolean knnwb_enum_from_string(const KnnwbEnumTable *table, const char *name, int *value,
                                GError **error);

/** The first listed name of value, or NULL when the table has none. O(names). */
const char *knnwb_enum_to_string(const KnnwbEnumTable *table, int value);

/**
 * The listed names joined by separator, last_separator between the last two: ("|", "|") gives
 * "a|b|c", (", ", " or ") gives "a, b or c". Free with g_free(). O(total length).
 */
char *knnwb_enum_list(const KnnwbEnumTable *table, const char *separator,
                      const char *last_separator);

G_END_DECLS

#endif
