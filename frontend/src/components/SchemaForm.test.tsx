import { fireEvent, render, screen, within } from "@testing-library/react";
import { useState } from "react";
import { describe, expect, it } from "vitest";
import { initialValue, placeErrors, resolveField, withoutDefaults, type JsonSchema } from "./jsonSchema";
import { SchemaForm } from "./SchemaForm";

const schema: JsonSchema = {
  type: "object",
  properties: {
    steps: { type: "integer", title: "Steps", default: 100, minimum: 1, description: "Training steps" },
    lr: { type: "number", title: "Lr", default: 0.1 },
    optimizer: { $ref: "#/$defs/Opt", default: "sgd" },
    slicing: { anyOf: [{ type: "string", enum: ["equal", "memory"] }, { type: "null" }], default: null, title: "Slicing" },
    pretrained: { type: "boolean", default: false, title: "Pretrained" },
  },
  $defs: { Opt: { type: "string", enum: ["sgd", "adam"], title: "Opt" } },
};

/** The shapes of the shipped algorithms' settings: a model union, a nested object, lists. */
const nested: JsonSchema = {
  type: "object",
  properties: {
    mode: { type: "string", enum: ["sync", "async"], default: "sync", title: "Mode" },
    staleness: { type: "integer", minimum: 1, default: 1, title: "Staleness" },
    model: {
      title: "Model",
      discriminator: { propertyName: "kind", mapping: { mlp: "#/$defs/MLPSpec", custom: "#/$defs/CustomSpec" } },
      oneOf: [{ $ref: "#/$defs/MLPSpec" }, { $ref: "#/$defs/CustomSpec" }],
    },
    data: { $ref: "#/$defs/ClickLogConfig", description: "The generated click log" },
    hidden: { type: "array", items: { type: "integer" }, title: "Hidden", maxItems: 3 },
    capacities: { anyOf: [{ type: "array", items: { type: "number" } }, { type: "null" }], default: null, title: "Capacities" },
  },
  $defs: {
    MLPSpec: {
      type: "object",
      title: "MLPSpec",
      properties: {
        kind: { const: "mlp", default: "mlp", type: "string", title: "Kind" },
        hidden: { type: "array", items: { type: "integer", minimum: 1 }, title: "Hidden" },
        activation: { type: "string", enum: ["relu", "tanh"], default: "relu", title: "Activation" },
      },
    },
    CustomSpec: {
      type: "object",
      title: "CustomSpec",
      required: ["target"],
      properties: {
        kind: { const: "custom", default: "custom", type: "string", title: "Kind" },
        target: { type: "string", title: "Target" },
        kwargs: { type: "object", additionalProperties: true, title: "Kwargs" },
      },
    },
    ClickLogConfig: {
      type: "object",
      title: "ClickLogConfig",
      properties: {
        vocab: { type: "integer", minimum: 2, default: 10000, title: "Vocab" },
        zipf_a: { type: "number", exclusiveMinimum: 1, default: 1.1, title: "Zipf A" },
      },
    },
  },
};

function Harness({ of = schema, errors = {} }: { of?: JsonSchema; errors?: Record<string, string> }) {
  const [value, setValue] = useState(initialValue(of));
  return (
    <>
      <SchemaForm schema={of} value={value} onChange={setValue} errors={errors} />
      <output data-testid="value">{JSON.stringify(value)}</output>
    </>
  );
}

const valueOf = () => JSON.parse(screen.getByTestId("value").textContent!);

describe("SchemaForm", () => {
  it("starts from the schema's defaults and edits typed values", () => {
    render(<Harness />);
    expect(screen.getByLabelText("Steps")).toHaveValue("100");
    expect(screen.getByLabelText("Opt")).toHaveValue("sgd");
    fireEvent.change(screen.getByLabelText("Steps"), { target: { value: "250" } });
    fireEvent.change(screen.getByLabelText("Lr"), { target: { value: "1e-3" } });
    fireEvent.change(screen.getByLabelText("Opt"), { target: { value: "adam" } });
    fireEvent.click(screen.getByLabelText("Pretrained"));
    expect(valueOf()).toMatchObject({ steps: 250, optimizer: "adam", pretrained: true, lr: 0.001 });
    expect(screen.getByLabelText("Lr")).toHaveValue("1e-3");
  });

  it("sends text that is no number as typed, for the server to refuse at the field", () => {
    render(<Harness />);
    fireEvent.change(screen.getByLabelText("Steps"), { target: { value: "ten" } });
    expect(valueOf().steps).toBe("ten");
    fireEvent.change(screen.getByLabelText("Steps"), { target: { value: "" } });
    expect(valueOf()).not.toHaveProperty("steps");
  });

  it("shows the server's message beside the field it names", () => {
    render(<Harness errors={{ lr: "Input should be greater than 0" }} />);
    expect(screen.getByRole("alert")).toHaveTextContent("greater than 0");
    expect(screen.getByLabelText("Lr")).toHaveAttribute("aria-invalid", "true");
  });

  it("resolves Optional[enum] to a nullable select", () => {
    const { s, nullable } = resolveField(schema.properties!.slicing, schema);
    expect(nullable).toBe(true);
    expect(s.enum).toEqual(["equal", "memory"]);
  });

  it("renders a model union as a select with the chosen member's own fields", () => {
    render(<Harness of={nested} />);
    const model = screen.getByRole("combobox", { name: "Model" });
    expect(model).toHaveDisplayValue("the algorithm's default");
    expect(valueOf()).not.toHaveProperty("model");
    fireEvent.change(model, { target: { value: "0" } });
    expect(valueOf().model).toEqual({ kind: "mlp", activation: "relu" });
    const group = screen.getByRole("group", { name: "Model" });
    fireEvent.click(within(group).getByRole("button", { name: "Add hidden" }));
    fireEvent.click(within(group).getByRole("button", { name: "Add hidden" }));
    fireEvent.change(document.getElementById("cfg-model-hidden-1")!, { target: { value: "32" } });
    expect(valueOf().model).toEqual({ kind: "mlp", activation: "relu", hidden: [1, 32] });
    fireEvent.click(within(group).getByRole("button", { name: "Remove Hidden 1" }));
    expect(valueOf().model.hidden).toEqual([32]);
    fireEvent.change(model, { target: { value: "1" } });
    expect(valueOf().model).toEqual({ kind: "custom" });
    fireEvent.change(within(group).getByLabelText("Target"), { target: { value: "pkg.mod:make" } });
    expect(valueOf().model).toEqual({ kind: "custom", target: "pkg.mod:make" });
    expect(within(group).queryByLabelText("Activation")).toBeNull();
  });

  it("edits nested objects and lists, bounded by maxItems", () => {
    render(<Harness of={nested} />);
    expect(valueOf().data).toEqual({ vocab: 10000, zipf_a: 1.1 });
    fireEvent.change(document.getElementById("cfg-data-vocab")!, { target: { value: "500" } });
    expect(valueOf().data).toEqual({ vocab: 500, zipf_a: 1.1 });
    const hidden = screen.getByRole("group", { name: "Hidden" });
    expect(within(hidden).getByText("The algorithm's default.")).toBeInTheDocument();
    const add = within(hidden).getByRole("button", { name: "Add hidden" });
    for (let i = 0; i < 3; i++) fireEvent.click(add);
    expect(add).toBeDisabled();
    expect(valueOf().hidden).toEqual([1, 1, 1]);
    fireEvent.click(within(hidden).getByRole("button", { name: "Use the algorithm's default" }));
    expect(valueOf()).not.toHaveProperty("hidden");
  });

  it("shows errors at nested paths at their field, the union's tag skipped", () => {
    const errors = {
      "model.mlp.hidden.0": "Input should be greater than or equal to 1",
      "data.vocab": "Input should be greater than or equal to 2",
      _: "Value error, staleness is too large for this mode",
      "nowhere.at.all": "a key this form does not have",
    };
    function WithModel() {
      const [value, setValue] = useState<Record<string, unknown>>({ ...initialValue(nested), model: { kind: "mlp", hidden: [0] } });
      return <SchemaForm schema={nested} value={value} onChange={setValue} errors={errors} />;
    }
    render(<WithModel />);
    expect(document.getElementById("cfg-model-hidden-0-error")).toHaveTextContent("greater than or equal to 1");
    expect(document.getElementById("cfg-model-hidden-0")).toHaveAttribute("aria-invalid", "true");
    expect(document.getElementById("cfg-data-vocab-error")).toHaveTextContent("greater than or equal to 2");
    expect(document.getElementById("cfg-staleness-error")).toHaveTextContent("staleness is too large");
    expect(document.getElementById("cfg-error")).toHaveTextContent("a key this form does not have");
  });
});

describe("withoutDefaults", () => {
  it("sends nothing for an untouched form, so mode-specific options stay unset", () => {
    expect(withoutDefaults(nested, initialValue(nested))).toEqual({});
  });

  it("keeps what differs, at any depth, and a union member's tag", () => {
    const value = {
      ...initialValue(nested),
      mode: "async",
      staleness: 2,
      data: { vocab: 10000, zipf_a: 2 },
      model: { kind: "mlp", hidden: [64], activation: "relu" },
      capacities: null,
    };
    expect(withoutDefaults(nested, value)).toEqual({ mode: "async", staleness: 2, data: { zipf_a: 2 }, model: { kind: "mlp", hidden: [64] } });
  });
});

describe("placeErrors", () => {
  it("puts a model-level message that names a field at that field", () => {
    expect(placeErrors(nested, { _: "Value error, data.vocab is too small" })).toEqual({ "data.vocab": "data.vocab is too small" });
    expect(placeErrors(nested, { _: "Value error, something else" })).toEqual({ _: "something else" });
  });
});
