/* The drawing model: nodes and edges as a laid-out GML describes them, for the renderer. */
#include <knnwb/drawing.h>

KnnwbDrawing *knnwb_drawing_new(void)
{
  KnnwbDrawing *drawing = g_new0(KnnwbDrawing, 1);
  drawing->nodes = g_array_new(FALSE, TRUE, sizeof(KnnwbDrawingNode));
  drawing->edges = g_array_new(FALSE, TRUE, sizeof(KnnwbDrawingEdge));
  return drawing;
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
  g_free(drawing);
}
