/* Reading a pipeline file into a libxml2 document, defensively. A pipeline needs no DTD, so any
 * DOCTYPE (and with it every entity declaration) is refused as soon as the parser meets it: no
 * entity is ever expanded, which closes the "billion laughs" and quadratic-expansion attacks
 * whatever libxml2's own limits are. The file is read (at most KNNWB_PIPELINE_MAX_BYTES) before
 * parsing, so FIFOs, devices and huge files cost nothing; nesting is capped as well. Parser errors
 * are collected in fixed buffers: the error callback never allocates, so an out-of-memory report
 * cannot recurse or abort. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <libxml/SAX2.h>
#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/xmlschemas.h>
#include "knnwb_pipeline_schema.h"
#include "pipeline/pipeline_internal.h"

/* Real pipelines are a few KiB; 50,000 generated steps are about 6 MiB. */
#define KNNWB_PIPELINE_MAX_BYTES ((size_t)64 << 20)
/* <pipeline><step><param/></step></pipeline> is three levels; the margin is for <description>
 * and future elements. */
#define KNNWB_PIPELINE_MAX_DEPTH 32
/* Problems kept from one parse or validation; the rest are counted. */
#define KNNWB_PIPELINE_XML_MESSAGES 64
#define KNNWB_PIPELINE_XML_MESSAGE_BYTES 512

typedef struct {
  char text[KNNWB_PIPELINE_XML_MESSAGES][KNNWB_PIPELINE_XML_MESSAGE_BYTES];
  int line[KNNWB_PIPELINE_XML_MESSAGES];
  guint n_kept;
  guint n_dropped;
  gboolean stopped; /* a refusal stopped the parser: whatever document it built is dropped */
  startElementNsSAX2Func start_element;
} KnnwbPipelineXmlErrors;

/* Called by libxml2, possibly while it is out of memory: formats into the fixed slots only. */
static void knnwb_pipeline_xml_record(KnnwbPipelineXmlErrors *errors, int line, const char *text)
{
  if (errors->n_kept == KNNWB_PIPELINE_XML_MESSAGES) {
    errors->n_dropped++;
    return;
  }
  char *slot = errors->text[errors->n_kept];
  snprintf(slot, KNNWB_PIPELINE_XML_MESSAGE_BYTES, "%s", text ? text : "XML error");
  size_t length = strlen(slot);
  while (length > 0 && (slot[length - 1] == '\n' || slot[length - 1] == ' '))
    slot[--length] = '\0';
  errors->line[errors->n_kept++] = line;
}

static void knnwb_pipeline_xml_error(void *data, xmlErrorPtr xml_error)
{
  if (xml_error == NULL || xml_error->level == XML_ERR_WARNING)
    return;
  knnwb_pipeline_xml_record(data, xml_error->line, xml_error->message);
}

static KnnwbPipelineXmlErrors *knnwb_pipeline_xml_errors_of(xmlParserCtxt *context)
{
  return context->_private;
}

/* SAX internalSubset: a <!DOCTYPE ...> was met, before any of its declarations is parsed. */
static void knnwb_pipeline_xml_refuse_doctype(void *data, const xmlChar *name,
                                              const xmlChar *external_id, const xmlChar *system_id)
{
  (void)name;
  (void)external_id;
  (void)system_id;
  xmlParserCtxt *context = data;
  knnwb_pipeline_xml_record(knnwb_pipeline_xml_errors_of(context), xmlSAX2GetLineNumber(context),
                            "a DOCTYPE (DTD or entity declaration) is not allowed in a pipeline: "
                            "pipelines need none, and entities could expand without bound; "
                            "remove the <!DOCTYPE ...> declaration");
  knnwb_pipeline_xml_errors_of(context)->stopped = TRUE;
  xmlStopParser(context);
}

/* Reached only if a declaration got past the DOCTYPE refusal; refused all the same. */
static void knnwb_pipeline_xml_refuse_entity(void *data, const xmlChar *name, int type,
                                             const xmlChar *public_id, const xmlChar *system_id,
                                             xmlChar *content)
{
  (void)name;
  (void)type;
  (void)public_id;
  (void)system_id;
  (void)content;
  xmlParserCtxt *context = data;
  knnwb_pipeline_xml_record(knnwb_pipeline_xml_errors_of(context), xmlSAX2GetLineNumber(context),
                            "an entity declaration is not allowed in a pipeline");
  knnwb_pipeline_xml_errors_of(context)->stopped = TRUE;
  xmlStopParser(context);
}

static void knnwb_pipeline_xml_start_element(void *data, const xmlChar *local_name,
                                             const xmlChar *prefix, const xmlChar *uri,
                                             int n_namespaces, const xmlChar **namespaces,
                                             int n_attributes, int n_defaulted,
                                             const xmlChar **attributes)
{
  xmlParserCtxt *context = data;
  KnnwbPipelineXmlErrors *errors = knnwb_pipeline_xml_errors_of(context);
  if (context->nameNr > KNNWB_PIPELINE_MAX_DEPTH) {
    char message[160];
    snprintf(message, sizeof message,
             "elements are nested more than %d levels deep; a pipeline needs three "
             "(<pipeline>, <step>, <param>)",
             KNNWB_PIPELINE_MAX_DEPTH);
    knnwb_pipeline_xml_record(errors, xmlSAX2GetLineNumber(context), message);
    errors->stopped = TRUE;
    xmlStopParser(context);
    return;
  }
  errors->start_element(data, local_name, prefix, uri, n_namespaces, namespaces, n_attributes,
                        n_defaulted, attributes);
}

/* Reads at most KNNWB_PIPELINE_MAX_BYTES + 1 bytes of path; NULL with a report when it cannot be
 * read or is larger. */
static char *knnwb_pipeline_xml_slurp(const char *path, size_t *size,
                                      KnnwbPipelineDiagnostics *diagnostics)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    int code = errno;
    if (fd >= 0)
      close(fd);
    knnwb_pipeline_report(diagnostics, 0, "cannot read: %s", g_strerror(code));
    return NULL;
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    knnwb_pipeline_report(diagnostics, 0, "is a directory, not a pipeline file");
    return NULL;
  }
  if (S_ISREG(st.st_mode) && (guint64)st.st_size > KNNWB_PIPELINE_MAX_BYTES) {
    close(fd);
    knnwb_pipeline_report(diagnostics, 0,
                          "the file has %" G_GUINT64_FORMAT " bytes; a pipeline may have at most "
                          "%zu MiB (real ones are a few KiB)",
                          (guint64)st.st_size, KNNWB_PIPELINE_MAX_BYTES >> 20);
    return NULL;
  }
  size_t capacity = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536;
  char *buffer = g_try_malloc(capacity);
  size_t filled = 0;
  int code = 0;
  while (buffer != NULL) {
    if (filled == capacity) {
      if (capacity > KNNWB_PIPELINE_MAX_BYTES)
        break;
      size_t grown = MIN(capacity * 2, KNNWB_PIPELINE_MAX_BYTES + 1);
      char *bigger = g_try_realloc(buffer, grown);
      if (bigger == NULL) {
        g_clear_pointer(&buffer, g_free);
        break;
      }
      buffer = bigger;
      capacity = grown;
    }
    ssize_t got = read(fd, buffer + filled, capacity - filled);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      code = errno;
      break;
    }
    if (got == 0)
      break;
    filled += (size_t)got;
  }
  close(fd);
  if (buffer == NULL) {
    knnwb_pipeline_report(diagnostics, 0, "cannot allocate %zu bytes to read it", capacity);
    return NULL;
  }
  if (code != 0) {
    g_free(buffer);
    knnwb_pipeline_report(diagnostics, 0, "read failed: %s", g_strerror(code));
    return NULL;
  }
  if (filled > KNNWB_PIPELINE_MAX_BYTES) {
    g_free(buffer);
    knnwb_pipeline_report(diagnostics, 0,
                          "more than %zu MiB were read; a pipeline may have at most %zu MiB (real "
                          "ones are a few KiB)",
                          KNNWB_PIPELINE_MAX_BYTES >> 20, KNNWB_PIPELINE_MAX_BYTES >> 20);
    return NULL;
  }
  *size = filled;
  return buffer;
}

static void knnwb_pipeline_xml_flush(KnnwbPipelineXmlErrors *errors,
                                     KnnwbPipelineDiagnostics *diagnostics)
{
  for (guint i = 0; i < errors->n_kept; i++)
    knnwb_pipeline_report(diagnostics, errors->line[i], "%s", errors->text[i]);
  if (errors->n_dropped > 0)
    knnwb_pipeline_report(diagnostics, 0, "... and %u more XML problems", errors->n_dropped);
  errors->n_kept = errors->n_dropped = 0;
}

/* Parses the bytes without DTDs, entities or network; NULL with diagnostics when not well formed.
 */
static xmlDoc *knnwb_pipeline_xml_parse(const char *path, const char *bytes, size_t size,
                                        KnnwbPipelineXmlErrors *errors,
                                        KnnwbPipelineDiagnostics *diagnostics)
{
  if (size > (size_t)G_MAXINT) /* cannot happen under the cap; xmlCtxtReadMemory takes an int */
    return NULL;
  xmlParserCtxt *context = xmlNewParserCtxt();
  if (context == NULL) {
    knnwb_pipeline_report(diagnostics, 0, "cannot allocate an XML parser");
    return NULL;
  }
  context->_private = errors;
  context->sax->internalSubset = knnwb_pipeline_xml_refuse_doctype;
  context->sax->externalSubset = knnwb_pipeline_xml_refuse_doctype;
  context->sax->entityDecl = knnwb_pipeline_xml_refuse_entity;
  errors->start_element = context->sax->startElementNs;
  context->sax->startElementNs = knnwb_pipeline_xml_start_element;
  xmlSetStructuredErrorFunc(errors, knnwb_pipeline_xml_error);
  /* BIG_LINES: line numbers past 65535 are right; NONET: a pipeline never fetches anything. No
   * NOENT (entities are never substituted), no DTDLOAD/DTDATTR, no HUGE (libxml2's own limits on
   * names and text nodes stay). */
  xmlDoc *document = xmlCtxtReadMemory(context, bytes, (int)size, path, NULL,
                                       XML_PARSE_BIG_LINES | XML_PARSE_NONET);
  xmlSetStructuredErrorFunc(NULL, NULL);
  if (document != NULL && (errors->stopped || !context->wellFormed))
    g_clear_pointer(&document, xmlFreeDoc);
  xmlFreeParserCtxt(context);
  knnwb_pipeline_xml_flush(errors, diagnostics);
  if (document == NULL && diagnostics->n_errors == 0)
    knnwb_pipeline_report(diagnostics, 0, "not a well-formed XML document");
  return document;
}

xmlDoc *knnwb_pipeline_read_xml(const char *path, KnnwbPipelineDiagnostics *diagnostics)
{
  size_t size = 0;
  g_autofree char *bytes = knnwb_pipeline_xml_slurp(path, &size, diagnostics);
  if (bytes == NULL)
    return NULL;
  g_autofree KnnwbPipelineXmlErrors *errors = g_try_new0(KnnwbPipelineXmlErrors, 1);
  if (errors == NULL) {
    knnwb_pipeline_report(diagnostics, 0, "cannot allocate the XML error buffers");
    return NULL;
  }
  xmlDoc *document = knnwb_pipeline_xml_parse(path, bytes, size, errors, diagnostics);
  if (document == NULL)
    return NULL;
  xmlNode *root = xmlDocGetRootElement(document);
  if (root == NULL || root->type != XML_ELEMENT_NODE ||
      xmlStrcmp(root->name, (const xmlChar *)"pipeline") != 0) {
    knnwb_pipeline_report(diagnostics, root ? (int)MIN(xmlGetLineNo(root), G_MAXINT) : 0,
                          "the root element must be <pipeline>, not <%s>",
                          root ? (const char *)root->name : "");
    xmlFreeDoc(document);
    return NULL;
  }

  xmlSchemaParserCtxt *parser =
      xmlSchemaNewMemParserCtxt(knnwb_pipeline_schema, (int)sizeof knnwb_pipeline_schema - 1);
  xmlSchema *schema = parser ? xmlSchemaParse(parser) : NULL;
  xmlSchemaValidCtxt *validator = schema ? xmlSchemaNewValidCtxt(schema) : NULL;
  int status = -1;
  if (validator != NULL) {
    xmlSchemaSetValidStructuredErrors(validator, knnwb_pipeline_xml_error, errors);
    xmlSetStructuredErrorFunc(errors, knnwb_pipeline_xml_error);
    /* libxml2 2.9 walks every node before an error's node, in document order, looking for an
     * XInclude start whenever the document has a URL: O(n) per error, 200 s for 20,000 errors.
     * Our messages name the file themselves, so the URL is hidden while validating. */
    const xmlChar *url = document->URL;
    document->URL = NULL;
    status = xmlSchemaValidateDoc(validator, document);
    document->URL = url;
    xmlSetStructuredErrorFunc(NULL, NULL);
    knnwb_pipeline_xml_flush(errors, diagnostics);
  } else {
    knnwb_pipeline_report(diagnostics, 0, "internal error: the built-in schema does not load");
  }
  if (status != 0 && diagnostics->n_errors == 0)
    knnwb_pipeline_report(diagnostics, 0, "does not follow the pipeline schema");
  xmlSchemaFreeValidCtxt(validator);
  xmlSchemaFree(schema);
  xmlSchemaFreeParserCtxt(parser);
  if (status != 0) {
    xmlFreeDoc(document);
    return NULL;
  }
  return document;
}
