import "@testing-library/jest-dom/vitest";
import { afterEach, vi } from "vitest";

// jsdom has no matchMedia; uPlot asks for the device pixel ratio through it.
if (!window.matchMedia) {
  window.matchMedia = (query: string) =>
    ({
      matches: false,
      media: query,
      onchange: null,
      addListener: () => {},
      removeListener: () => {},
      addEventListener: () => {},
      removeEventListener: () => {},
      dispatchEvent: () => false,
    }) as MediaQueryList;
}

// tests that stub fetch or sign someone in leave nothing behind for the next one
afterEach(() => {
  vi.unstubAllGlobals();
  localStorage.clear();
});
