// A minimal ambient declaration of the parts of React an export uses, so the compile test runs
// without @types/react: useEffect, and JSX elements with any attributes.
declare module "react" {
  export function useEffect(effect: () => void | (() => void), deps?: ReadonlyArray<unknown>): void;
}

declare module "react/jsx-runtime" {
  export const jsx: (type: unknown, props: unknown, key?: unknown) => unknown;
  export const jsxs: (type: unknown, props: unknown, key?: unknown) => unknown;
  export const Fragment: unknown;
  export namespace JSX {
    type Element = unknown;
    interface IntrinsicAttributes {
      key?: string | number;
    }
    interface IntrinsicElements {
      [name: string]: Record<string, unknown>;
    }
    interface ElementChildrenAttribute {
      children: {};
    }
  }
}
