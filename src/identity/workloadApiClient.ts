/**
 * A client of the SPIFFE Workload API (gRPC over the agent's unix socket, `SPIFFE_ENDPOINT_SOCKET`).
 * Every call carries the metadata `workload.spiffe.io: true` the spec requires (the agent refuses
 * calls without it). One-shot calls take a deadline; the streaming calls (X.509-SVIDs, bundles) are
 * `watch*` methods whose callbacks see every update the agent pushes (rotation), until cancelled.
 */
import * as grpc from '@grpc/grpc-js';
import { fromJSON } from '@grpc/proto-loader';
import { AmfError } from '../errors.js';
import { workloadApiTarget } from './workloadApiSocket.js';
import {
  WORKLOAD_API_SCHEMA,
  type JwtBundlesResponse,
  type JwtSvidResponse,
  type ValidateJwtSvidResponse,
  type X509BundlesResponse,
  type X509SvidResponse,
} from './workloadApiSchema.js';

/** Deadline of one unary call unless the caller gives one. */
export const DEFAULT_CALL_TIMEOUT_MS = 5_000;
/** Largest message accepted from the agent (bundles of many federated domains stay far below). */
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

// The descriptor is plain JSON; protobuf.js types ask for optional fields (comments) it does not need.
const definition = fromJSON(WORKLOAD_API_SCHEMA as unknown as Parameters<typeof fromJSON>[0], {
  keepCase: true,
  defaults: true,
  longs: String,
});
const ServiceClient = grpc.loadPackageDefinition(definition)
  .SpiffeWorkloadAPI as grpc.ServiceClientConstructor;

type Unary<Req, Res> = (
  req: Req,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (err: grpc.ServiceError | null, res?: Res) => void,
) => grpc.ClientUnaryCall;
type ServerStream<Req> = (req: Req, metadata: grpc.Metadata) => grpc.ClientReadableStream<unknown>;

interface RawClient extends grpc.Client {
  FetchJWTSVID: Unary<{ audience: string[]; spiffe_id: string }, JwtSvidResponse>;
  ValidateJWTSVID: Unary<{ audience: string; svid: string }, ValidateJwtSvidResponse>;
  FetchX509SVID: ServerStream<object>;
  FetchX509Bundles: ServerStream<object>;
  FetchJWTBundles: ServerStream<object>;
}

/** Cancels a watch. */
export type Unwatch = () => void;

/** Callbacks of one server stream. `onError` fires once when the stream ends for any reason but cancel. */
export interface WatchCallbacks<T> {
  onUpdate(message: T): void;
  onError(err: Error): void;
}

function metadata(): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set('workload.spiffe.io', 'true');
  return md;
}

/** A Workload API error with the gRPC status in its message (never the SVID or a key). */
function callError(method: string, err: grpc.ServiceError): AmfError {
  const code = err.code === grpc.status.DEADLINE_EXCEEDED ? 'TIMEOUT' : 'UNAVAILABLE';
  return new AmfError(code, `SPIFFE Workload API ${method} failed: ${grpc.status[err.code]} ${err.details}`);
}

/** One connection to a SPIFFE Workload API endpoint. */
export class WorkloadApiClient {
  private readonly client: RawClient;
  private readonly streams = new Set<grpc.ClientReadableStream<unknown>>();

  constructor(socket: string) {
    this.client = new ServiceClient(workloadApiTarget(socket), grpc.credentials.createInsecure(), {
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    }) as unknown as RawClient;
  }

  /** JWT-SVIDs for `audience` (first is the default identity; `spiffeId` asks for one of several). */
  fetchJwtSvid(
    audience: string[],
    spiffeId = '',
    timeoutMs = DEFAULT_CALL_TIMEOUT_MS,
  ): Promise<JwtSvidResponse> {
    return this.unary('FetchJWTSVID', { audience, spiffe_id: spiffeId }, timeoutMs);
  }

  /** Asks the agent to validate a JWT-SVID for `audience` (AMF verifies locally; this is the cross-check). */
  validateJwtSvid(
    audience: string,
    svid: string,
    timeoutMs = DEFAULT_CALL_TIMEOUT_MS,
  ): Promise<ValidateJwtSvidResponse> {
    return this.unary('ValidateJWTSVID', { audience, svid }, timeoutMs);
  }

  /** X.509-SVIDs of this workload, pushed again on every rotation. */
  watchX509Svids(callbacks: WatchCallbacks<X509SvidResponse>): Unwatch {
    return this.watch('FetchX509SVID', callbacks);
  }

  /** X.509 trust bundles (trust domain → DER CA certificates), pushed again on every change. */
  watchX509Bundles(callbacks: WatchCallbacks<X509BundlesResponse>): Unwatch {
    return this.watch('FetchX509Bundles', callbacks);
  }

  /** JWT bundles (trust domain → JWKS JSON), pushed again on every change. */
  watchJwtBundles(callbacks: WatchCallbacks<JwtBundlesResponse>): Unwatch {
    return this.watch('FetchJWTBundles', callbacks);
  }

  /** Resolves with the first message of a stream (a one-shot fetch of a streaming call). */
  first<T>(watchFn: (cb: WatchCallbacks<T>) => Unwatch, timeoutMs = DEFAULT_CALL_TIMEOUT_MS): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        unwatch();
        reject(new AmfError('TIMEOUT', `SPIFFE Workload API sent nothing within ${timeoutMs} ms`));
      }, timeoutMs);
      const unwatch = watchFn({
        onUpdate: (m) => {
          clearTimeout(timer);
          unwatch();
          resolve(m);
        },
        onError: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      });
    });
  }

  /** Cancels every open stream and closes the channel. */
  close(): void {
    for (const s of this.streams) s.cancel();
    this.streams.clear();
    this.client.close();
  }

  private unary<Req, Res>(
    method: 'FetchJWTSVID' | 'ValidateJWTSVID',
    req: Req,
    timeoutMs: number,
  ): Promise<Res> {
    const fn = this.client[method] as unknown as Unary<Req, Res>;
    return new Promise<Res>((resolve, reject) => {
      fn.call(this.client, req, metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => {
        if (err) reject(callError(method, err));
        else if (!res) reject(new AmfError('UNAVAILABLE', `SPIFFE Workload API ${method} returned nothing`));
        else resolve(res);
      });
    });
  }

  private watch<T>(
    method: 'FetchX509SVID' | 'FetchX509Bundles' | 'FetchJWTBundles',
    callbacks: WatchCallbacks<T>,
  ): Unwatch {
    const stream = (this.client[method] as ServerStream<object>).call(this.client, {}, metadata());
    this.streams.add(stream);
    let cancelled = false;
    let ended = false;
    const end = (err: Error) => {
      if (ended || cancelled) return;
      ended = true;
      this.streams.delete(stream);
      callbacks.onError(err);
    };
    stream.on('data', (m: T) => {
      if (!cancelled) callbacks.onUpdate(m);
    });
    stream.on('error', (err: grpc.ServiceError) => end(callError(method, err)));
    stream.on('end', () => end(new AmfError('UNAVAILABLE', `SPIFFE Workload API ${method} stream ended`)));
    return () => {
      if (cancelled) return;
      cancelled = true;
      this.streams.delete(stream);
      stream.cancel();
    };
  }
}
