/**
 * The public API of the `amf-mesh` package: what handler authors and embedders use. Everything else
 * under src/ is internal and may change between releases.
 *
 * - Start a coordinator (`startCoordinator`), a worker with a TypeScript handler (`startWorker`), or an
 *   AFM agent from its markdown file (`startAfmAgent`), in your own process.
 * - Write handlers against `WorkerHandler` / `TaskContext`, failing tasks with `HandlerError`.
 * - Load configuration the way the CLI does (`loadConfig`) and AFM files (`loadAfmFile`).
 * - Every error AMF raises on purpose is an `AmfError` with a stable `code`.
 */
export {
  startCoordinator,
  startCoordinatorHttp,
  type StartCoordinatorOptions,
  type RunningCoordinator,
  type CoordinatorHttp,
} from './apps/coordinatorApp.js';
export { startWorker, type StartWorkerOptions, type RunningWorker } from './apps/workerApp.js';
export { startAfmAgent, type StartAfmAgentOptions, type RunningAgent } from './apps/afmAgentApp.js';
export { Coordinator, type CoordinatorOptions } from './coordinator/coordinator.js';
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
