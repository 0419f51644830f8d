/* The drawing model: nodes and edges as a laid-out GML describes them, for the renderer. */
#include <string.h>
#include <knnwb/drawing.h>

KnnwbDrawing *knnwb_drawing_new(void)
{
  KnnwbDrawing *drawing = g_new0(KnnwbDrawing, 1);
  drawing->nodes = g_array_new(FALSE, TRUE, sizeof(KnnwbDrawingNode));
  drawing->edges = g_array_new(FALSE, TRUE, sizeof(KnnwbDrawingEdge));
  drawing->attributes =
      g_ptr_array_new_with_free_func((GDestroyNotify)knnwb_drawing_attribute_free);
  return drawing;
}

KnnwbDrawingAttribute *knnwb_drawing_attribute_new(const char *name)
{
  KnnwbDrawingAttribute *column = g_new0(KnnwbDrawingAttribute, 1);
  column->name = g_strdup(name);
  column->texts = g_ptr_array_new_with_free_func(g_free);
  column->numbers = g_array_new(FALSE, FALSE, sizeof(double));
  return column;
}

void knnwb_drawing_attribute_free(KnnwbDrawingAttribute *column)
{
  if (column == NULL)
    return;
  g_free(column->name);
  g_ptr_array_unref(column->texts);
  g_array_unref(column->numbers);
  g_free(column);
}

const KnnwbDrawingAttribute *knnwb_drawing_attribute(const KnnwbDrawing *drawing, const char *name)
{
  for (guint c = 0; c < drawing->attributes->len; c++) {
    const KnnwbDrawingAttribute *column = g_ptr_array_index(drawing->attributes, c);
    if (strcmp(column->name, name) == 0)
      return column;
  }
  return NULL;
}

void knnwb_drawing_free(KnnwbDrawing *drawing)
{
  if (drawing == NULL)
    return;
  if (drawing->nodes != NULL) {
    for (guint v = 0; v < drawing->nodes->len; v++)
      g_free(g_array_index(drawing->nodes, KnnwbDrawingNode, v).label);
    g_array_free(drawing->nodes, TRUE);
  }
  if (drawing->edges != NULL)
    g_array_free(drawing->edges, TRUE);
  if (drawing->attributes != NULL)
    g_ptr_array_unref(drawing->attributes);
  g_free(drawing);
}
