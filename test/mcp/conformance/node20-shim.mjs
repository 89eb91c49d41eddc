// `node --import ./node20-shim.mjs`: registers node20-globsync-hook.mjs (see there for why).
import { register } from 'node:module';
register('./node20-globsync-hook.mjs', import.meta.url);
