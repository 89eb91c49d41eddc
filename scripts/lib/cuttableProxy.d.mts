/** A TCP proxy that can cut the line (see cuttableProxy.mjs). */
export interface CuttableProxy {
  /** The port clients dial instead of the target's. */
  readonly port: number;
  /** Closes every connection through the proxy and refuses new ones until {@link CuttableProxy.heal}. */
  cut(): void;
  heal(): void;
  readonly isCut: boolean;
  close(): Promise<void>;
}

export function startCuttableProxy(targetPort: number, targetHost?: string): Promise<CuttableProxy>;
