/**
 * The MCP tools: what an AI agent can do on the farm. Each but the farm
 * summary is a REST route run in-process (src/mcp/route-tools.ts), so its
 * arguments, answer, scope and error codes are the route's.
 */
import { createPrintJobRoute, changePrintJobStatusRoute, getPrintJobRoute, listPrintJobsRoute, type PrintJobsContext } from '../routes/print-jobs.js'
import { getPrinterRoute, listPrintersRoute, type PrintersContext } from '../routes/printers.js'
import { maintenanceRoute, type PrinterConfigContext } from '../routes/printer-config.js'
import { printerReadyRoute, type PrinterTasksContext } from '../routes/printer-tasks.js'
import { getQueueRoute, type QueueContext } from '../routes/queue.js'
import { listModelsRoute, type ModelsContext } from '../routes/models.js'
import { listModelFilesRoute, type ModelFilesContext } from '../routes/model-files.js'
import { fileMetadataRoute, type FilesContext } from '../routes/files.js'
import { listMaterialsRoute, type MaterialsContext } from '../routes/materials.js'
import { adjustSpoolRoute, listSpoolsRoute, type InventoryContext } from '../routes/inventory.js'
import type { Route, RouteSchemas } from '../http/route.js'
import { RouteTool, type RouteToolSpec } from './route-tools.js'

/** What the tools use of the node: the slices of the routes they run. */
export type ToolsContext = PrintJobsContext &
  PrintersContext &
  PrinterConfigContext &
  PrinterTasksContext &
  QueueContext &
  ModelsContext &
  ModelFilesContext &
  FilesContext &
  MaterialsContext &
  InventoryContext

const r = (route: unknown): Route<RouteSchemas, ToolsContext> => route as Route<RouteSchemas, ToolsContext>

const specs: RouteToolSpec<ToolsContext>[] = [
  {
    name: 'list_printers',
    title: 'List printers',
    description: "The organization's printers with their live state: status, current job and progress, temperatures, loaded filaments, errors. Filter by status, host, online, or a part of the name.",
    route: r(listPrintersRoute),
    readOnly: true,
  },
  { name: 'get_printer', title: 'Get a printer', description: "One printer's live state, by its id.", route: r(getPrinterRoute), readOnly: true },
  {
    name: 'set_maintenance',
    title: 'Set maintenance',
    description: 'Turn a printer\'s maintenance flag on (it takes no job; refused while it prints) or off. Needs an admin.',
    route: r(maintenanceRoute),
    readOnly: false,
  },
  {
    name: 'list_jobs',
    title: 'List print jobs',
    description: 'Print jobs, newest first, with why each queued job waits. Filter by status, printer, model file, make, batch or name.',
    route: r(listPrintJobsRoute),
    readOnly: true,
  },
  {
    name: 'get_print_job',
    title: 'Get a print job',
    description: 'One print job by its id: status, printer, progress, verification; while it waits, its place in the queue and every reason per printer.',
    route: r(getPrintJobRoute),
    readOnly: true,
  },
  {
    name: 'create_print_job',
    title: 'Create a print job',
    description:
      'Queue a print of one plate of a model file, optionally as a make with its chosen materials. The queue sends it to a matching printer. ' +
      'Give an idempotency_key (any text, 1-200 characters, new per intended print) and a retry after a lost answer returns the job the first call made instead of queueing a second print ' +
      '(whatever the retry\'s other arguments say: use a new key for a new print). Needs an admin.',
    route: r(createPrintJobRoute),
    headers: { idempotency_key: { header: 'idempotency-key', schema: { type: 'string', minLength: 1, maxLength: 200, description: 'Makes a retry safe: a second call with the same key answers the job the first one created.' } } },
    readOnly: false,
  },
  {
    name: 'cancel_print_job',
    title: 'Cancel a print job',
    description: 'Cancel a queued, dispatching, printing or paused job (a printing one is stopped on its printer). Needs an admin.',
    route: r(changePrintJobStatusRoute),
    fixed: { body: { status: 'cancelled' } },
    readOnly: false,
  },
  {
    name: 'queue_status',
    title: 'Queue status',
    description: 'The queue in order: jobs being dispatched, then waiting jobs with the printer each would go to, or every reason per printer it waits.',
    route: r(getQueueRoute),
    readOnly: true,
  },
  {
    name: 'verify_print',
    title: 'Verify a finished print',
    description: "The operator's verdict on a printer's finished job (success, failed with a reason and optionally requeued, cancelled, skipped), which lets the printer take the next job. Needs an admin.",
    route: r(printerReadyRoute),
    readOnly: false,
  },
  { name: 'list_models', title: 'List models', description: 'The models of the organization, with their files.', route: r(listModelsRoute), readOnly: true },
  {
    name: 'list_model_files',
    title: 'List model files',
    description:
      "The files of one model (modelId, from list_models) with their slicer metadata: plates, filaments, printer profile, print time. view is 'active' (the files in use) or 'deleted'; filter further by search, tags, or filters (printing, queued, has_makes, missing_label).",
    route: r(listModelFilesRoute),
    readOnly: true,
  },
  {
    name: 'get_file_metadata',
    title: 'Get file metadata',
    description: "One file's metadata as its slicer recorded it: plates, filaments, estimates.",
    route: r(fileMetadataRoute),
    omit: ['print_job_id', 'printer_task_id', 'claim_generation', 'printer_task_access_token', 'expires', 'signature'],
    readOnly: true,
  },
  { name: 'list_materials', title: 'List materials', description: 'The materials catalogue: type, brand, colour.', route: r(listMaterialsRoute), readOnly: true },
  { name: 'list_inventory', title: 'List spools', description: 'Spools in the inventory: material, grams left, where each is loaded.', route: r(listSpoolsRoute), readOnly: true },
  {
    name: 'adjust_inventory',
    title: 'Adjust a spool',
    description: 'Correct the grams left on a spool (delta_g, negative takes) with the reason; answers the ledger entry and the spool. Needs an admin.',
    route: r(adjustSpoolRoute),
    readOnly: false,
  },
]

export function routeTools(): RouteTool<ToolsContext>[] {
  return specs.map((spec) => new RouteTool(spec))
}
