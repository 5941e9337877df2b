// npm run bench: every benchmark whose backend is available, one table each.
import { benchMemory } from './memory.mjs';

await benchMemory();
