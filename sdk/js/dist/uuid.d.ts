/** uuidv7 returns a new, monotonically increasing UUIDv7 string. */
export declare function uuidv7(): string;
