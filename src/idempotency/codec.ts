import { InvalidArgumentError } from '../errors.js';

/** How results are stored. The default is JSON; supply your own for Dates, bigints, Buffers … */
export interface ResultCodec {
  encode(value: unknown): string;
  decode(text: string): unknown;
}

const UNDEFINED = '';

/** The default codec: JSON, with `undefined` kept. */
export const jsonCodec: ResultCodec = {
  encode(value) {
    if (value === undefined) return UNDEFINED;
    let text: string | undefined;
    try {
      text = JSON.stringify(value);
    } catch (error) {
      throw new InvalidArgumentError('result', `cannot be stored as JSON: ${(error as Error).message}`);
    }
    if (text === undefined)
      throw new InvalidArgumentError('result', `a ${typeof value} cannot be stored as JSON`);
    return text;
  },
  decode(text) {
    return text === UNDEFINED ? undefined : JSON.parse(text);
  },
};
