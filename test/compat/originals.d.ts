// The original libraries the facade is checked against: redlock 4 ships no types, and the types of
// redlock 5.0.0-beta.2 are outside its package.json "exports" (the test types what it uses).
declare module 'redlock';
declare module 'redlock5';
