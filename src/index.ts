/**
 * The public API of the `amf-mesh` package: what handler authors and embedders use. Everything else
 * under src/ is internal and may change between releases.
 *
 * - Start a coordinator (`startCoordinator`; `startCoordinatorRuntime` without its HTTP edge), a worker
 *   with a TypeScript handler (`startWorker`), or an AFM agent from its markdown file
 *   (`startAfmAgent`), in your own process.
 * - Write handlers against `WorkerHandler` / `TaskContext`, failing tasks with `HandlerError`.
 * - Load configuration the way the CLI does (`loadConfig`) and AFM files (`loadAfmFile`).
 * - Every error AMF raises on purpose is an `AmfError` with a stable `code`.
 */
// A coordinator is started by these functions and handled through their interfaces, not the
// Coordinator class: a class started by hand lacks what the composition adds (the federated MCP
// catalog, the HTTP edge, mDNS, the A2A bridges), and its constructor and internals are no contract.
export { startCoordinator, type RunningCoordinator, type CoordinatorHttp } from './apps/coordinatorApp.js';
export {
  startCoordinatorRuntime,
  type StartCoordinatorOptions,
  type CoordinatorRuntime,
} from './apps/coordinatorRuntime.js';
export { startWorker, type StartWorkerOptions, type RunningWorker } from './apps/workerApp.js';
export { startAfmAgent, type StartAfmAgentOptions, type RunningAgent } from './apps/afmAgentApp.js';
export {
  HandlerError,
  TaskRejectedError,
  type FollowUpMessage,
  type ResultArtifact,
  type ArtifactPart,
  type WorkerHandler,
  type TaskHandler,
  type TaskContext,
  type HandlerResult,
  type TaskTools,
} from './worker/handlerApi.js';
export type { ChatMessage, Usage } from './events/payloads.js';
export {
  loadConfig,
  ConfigError,
  DEFAULT_CONFIG,
  type AmfConfig,
  type ConfigOverrides,
  type LoadConfigOptions,
} from './config/config.js';
export { loadAfmFile, validateAfmFile, AfmLoadError, type AfmDefinition } from './afm/index.js';
export { readCredentials, type RoleCredential } from './fabric/credentials.js';
export { AmfError, type AmfErrorCode } from './errors.js';
export { VERSION } from './version.js';
