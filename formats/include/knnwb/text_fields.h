/* One field of a text table as every knnwb reader and writer sees it: missing-value tokens,
 * numbers parsed exactly as strtof would, TSV quoting, and a field shown safely in a message. */
#ifndef KNNWB_TEXT_FIELDS_H
#define KNNWB_TEXT_FIELDS_H

#include <glib.h>
#include <stddef.h>
#include <stdio.h>

G_BEGIN_DECLS

/** Result of parsing a number. */
typedef enum {
  KNNWB_FLOAT_OK,
  KNNWB_FLOAT_SYNTAX, /**< no number starts at p (or, for a whole field, text follows it) */
  KNNWB_FLOAT_RANGE,  /**< a number, but beyond float range (it would be infinite) */
  KNNWB_FLOAT_TINY    /**< a nonzero number below float's normal range (|x| < 2^-126): *value
                           holds its rounding, a subnormal with fewer digits or 0 */
} KnnwbFloatStatus;

/**
 * Parses all of [text, text + length) as one decimal number ([+-]digits[.digits][(e|E)[+-]digits],
 * no blanks) into the float nearest to it, bit for bit what strtof gives in the C locale whatever
 * the process's locale. KNNWB_FLOAT_SYNTAX when no number starts at text or anything follows it
 * (a RANGE number followed by text is still RANGE). Never fails otherwise. O(length).
 */
KnnwbFloatStatus knnwb_formats_parse_float_field(const char *text, size_t length, float *value);

/** TRUE when [p, p + length) spells a missing value: empty, NA, N/A, NaN, null, Inf (any case,
 * signed), the tokens every reader treats as missing. O(length). */
gboolean knnwb_formats_is_missing_token(const char *p, size_t length);

/** A printable, shortened copy of a field for messages: quoted, at most 40 bytes (then "..."),
 * controls escaped (\\0, \\xNN). Free with g_free. Never fails. O(min(length, 40)). */
char *knnwb_formats_quote_field(const char *p, size_t length);

/**
 * Appends [text, text + length) to out as a terminal may show it: C0 controls other than tab and
 * line feed (ESC, BEL, CR, ...), DEL and bytes that are not UTF-8 become \\xNN; C1 controls and the
 * bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069) become \\uNNNN; everything
 * else is kept. When final is FALSE, a character cut at the end is left for the next piece:
 * *used (may be NULL) says how many bytes were taken. Never fails. O(length).
 */
void knnwb_formats_escape_terminal(GString *out, const char *text, size_t length, gboolean final,
                                   size_t *used);

/** Writes s to stream as a TSV field, quoting it (" doubled inside) when it holds a tab, quote, CR
 * or LF, so that the TSV readers of knnwb, R and pandas read it back whole. Errors are left in the
 * stream's error flag (the atomic file's commit reports them). O(strlen(s)). */
void knnwb_formats_write_tsv_field(FILE *stream, const char *s);

G_END_DECLS

#endif
