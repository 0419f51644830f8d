/* Name lookups, printing and lists over one table per enum (<knnwb/enum_names.h>). */
#include <knnwb/enum_names.h>
#include <knnwb/error.h>

gboolean knnwb_enum_from_string(const KnnwbEnumTable *table, const char *name, int *value,
                                GError **error)
{
  for (size_t i = 0; name != NULL && i < table->n_names; i++)
    if (g_ascii_strcasecmp(name, table->names[i].name) == 0) {
      *value = table->names[i].value;
      return TRUE;
    }
  g_autofree char *known = knnwb_enum_list(table, ", ", table->last_separator);
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "%s'%s'%s%s%s", table->before,
              name != NULL ? name : table->null_name, table->between, known, table->after);
  return FALSE;
}

const char *knnwb_enum_to_string(const KnnwbEnumTable *table, int value)
{
  for (size_t i = 0; i < table->n_listed; i++)
    if (table->names[i].value == value)
      return table->names[i].name;
  return NULL;
}

char *knnwb_enum_list(const KnnwbEnumTable *table, const char *separator,
                      const char *last_separator)
{
  GString *list = g_string_new(NULL);
  for (size_t i = 0; i < table->n_listed; i++) {
    if (i > 0)
      g_string_append(list, i + 1 == table->n_listed ? last_separator : separator);
    g_string_append(list, table->names[i].name);
  }
  return g_string_free(list, FALSE);
}
