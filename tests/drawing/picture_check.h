/* Reading pictures back for the drawing tests: a PNG decoded by cairo into RGB pixels, nodes found
 * by their unique fill colour, the darkest pixel near a point, the white border. */
#ifndef KNNWB_PICTURE_CHECK_H
#define KNNWB_PICTURE_CHECK_H

#include <cairo.h>
#include <glib.h>
#include <math.h>

typedef struct {
  int width, height;
  guint8 *rgb; /* width * height * 3 */
} KnnwbTestPicture;

/* The PNG at path, or an assertion failure. */
static inline KnnwbTestPicture knnwb_test_picture_read(const char *path)
{
  cairo_surface_t *surface = cairo_image_surface_create_from_png(path);
  g_assert_cmpint(cairo_surface_status(surface), ==, CAIRO_STATUS_SUCCESS);
  cairo_surface_flush(surface);
  KnnwbTestPicture picture = {cairo_image_surface_get_width(surface),
                              cairo_image_surface_get_height(surface), NULL};
  picture.rgb = g_malloc((size_t)picture.width * (size_t)picture.height * 3);
  const unsigned char *data = cairo_image_surface_get_data(surface);
  int stride = cairo_image_surface_get_stride(surface);
  for (int y = 0; y < picture.height; y++)
    for (int x = 0; x < picture.width; x++) {
      guint32 pixel = *(const guint32 *)(const void *)(data + (size_t)y * stride + 4 * (size_t)x);
      guint8 *out = picture.rgb + 3 * ((size_t)y * picture.width + x);
      out[0] = (pixel >> 16) & 255, out[1] = (pixel >> 8) & 255, out[2] = pixel & 255;
    }
  cairo_surface_destroy(surface);
  return picture;
}

static inline const guint8 *knnwb_test_picture_at(const KnnwbTestPicture *picture, int x, int y)
{
  x = CLAMP(x, 0, picture->width - 1);
  y = CLAMP(y, 0, picture->height - 1);
  return picture->rgb + 3 * ((size_t)y * picture->width + x);
}

/* The lowest channel of the pixels within radius of (x, y): 255 is white, an antialiased thin
 * line somewhere in the square reads darker. */
static inline int knnwb_test_picture_darkest(const KnnwbTestPicture *picture, double x, double y,
                                             int radius)
{
  int darkest = 255;
  for (int dy = -radius; dy <= radius; dy++)
    for (int dx = -radius; dx <= radius; dx++) {
      const guint8 *p = knnwb_test_picture_at(picture, (int)lround(x) + dx, (int)lround(y) + dy);
      darkest = MIN(darkest, MIN(p[0], MIN(p[1], p[2])));
    }
  return darkest;
}

/* Where the pixels of exactly colour (0xRRGGBB) are: their count, centre and bounding box. */
typedef struct {
  size_t count;
  double x, y;
  int x0, y0, x1, y1;
} KnnwbTestBlob;

static inline KnnwbTestBlob knnwb_test_picture_find(const KnnwbTestPicture *picture, guint32 colour)
{
  KnnwbTestBlob blob = {0, 0, 0, G_MAXINT, G_MAXINT, -1, -1};
  for (int y = 0; y < picture->height; y++)
    for (int x = 0; x < picture->width; x++) {
      const guint8 *p = knnwb_test_picture_at(picture, x, y);
      if (((guint32)p[0] << 16 | (guint32)p[1] << 8 | p[2]) != colour)
        continue;
      blob.count++, blob.x += x, blob.y += y;
      blob.x0 = MIN(blob.x0, x), blob.y0 = MIN(blob.y0, y);
      blob.x1 = MAX(blob.x1, x), blob.y1 = MAX(blob.y1, y);
    }
  if (blob.count > 0)
    blob.x /= (double)blob.count, blob.y /= (double)blob.count;
  return blob;
}

/* TRUE when every pixel within band pixels of the picture's edge is white: nothing drawn there,
 * so nothing is cut by it. */
static inline gboolean knnwb_test_picture_border_white(const KnnwbTestPicture *picture, int band)
{
  for (int y = 0; y < picture->height; y++)
    for (int x = 0; x < picture->width; x++) {
      if (x >= band && y >= band && x < picture->width - band && y < picture->height - band)
        continue;
      const guint8 *p = knnwb_test_picture_at(picture, x, y);
      if (p[0] != 255 || p[1] != 255 || p[2] != 255)
        return FALSE;
    }
  return TRUE;
}

static inline void knnwb_test_picture_clear(KnnwbTestPicture *picture)
{
  g_clear_pointer(&picture->rgb, g_free);
}

#endif
