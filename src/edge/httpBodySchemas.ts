/**
 * Every JSON schema of an HTTP request body in AMF, for the build step that precompiles them into
 * one module (scripts/build-validators.mjs, http/bodyValidatorBuild.ts). A route's schema missing
 * here still works (it is compiled on first use); a test keeps the list complete.
 */
import type { BodySchema } from '../http/bodySchema.js';
import { AMP_MESSAGE_SCHEMA } from '../protocols/amp/ampMessageSchema.js';
import { FABRIC_CALL_ARGUMENTS_SCHEMA, FABRIC_REQUEST_SCHEMA } from '../protocols/fabric/fabricCallSchema.js';
import { CHAT_REQUEST_SCHEMA } from '../protocols/openai/chatRequestSchema.js';
import {
  APPROVE_BODY_SCHEMA,
  CANCEL_PAYLOAD_SCHEMA,
  INVITE_BODY_SCHEMA,
  JOIN_BODY_SCHEMA,
  WORKER_TASK_BODY_SCHEMA,
} from './routeBodySchemas.js';

export const HTTP_BODY_SCHEMAS: readonly BodySchema[] = [
  CHAT_REQUEST_SCHEMA,
  AMP_MESSAGE_SCHEMA,
  FABRIC_REQUEST_SCHEMA,
  FABRIC_CALL_ARGUMENTS_SCHEMA,
  APPROVE_BODY_SCHEMA,
  INVITE_BODY_SCHEMA,
  JOIN_BODY_SCHEMA,
  WORKER_TASK_BODY_SCHEMA,
  CANCEL_PAYLOAD_SCHEMA,
];
