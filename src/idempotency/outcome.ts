/** What a finished run left: a value (codec text) or a FinalError (JSON of message, status, details). */
export interface StoredOutcome {
  kind: 'value' | 'final-error';
  body: string;
}
