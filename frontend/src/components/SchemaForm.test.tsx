import { fireEvent, render, screen } from "@testing-library/react";
import { useState } from "react";
import { describe, expect, it } from "vitest";
import { defaultsOf, resolveField, SchemaForm, type JsonSchema } from "./SchemaForm";

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

function Harness({ errors = {} }: { errors?: Record<string, string> }) {
  const [value, setValue] = useState(defaultsOf(schema));
  return (
    <>
      <SchemaForm schema={schema} value={value} onChange={setValue} errors={errors} />
      <output data-testid="value">{JSON.stringify(value)}</output>
    </>
  );
}

describe("SchemaForm", () => {
  it("starts from the schema's defaults and edits typed values", () => {
    render(<Harness />);
    expect(screen.getByLabelText("Steps")).toHaveValue(100);
    expect(screen.getByLabelText("Opt")).toHaveValue("sgd");
    fireEvent.change(screen.getByLabelText("Steps"), { target: { value: "250" } });
    fireEvent.change(screen.getByLabelText("Opt"), { target: { value: "adam" } });
    fireEvent.click(screen.getByLabelText("Pretrained"));
    const value = JSON.parse(screen.getByTestId("value").textContent!);
    expect(value).toMatchObject({ steps: 250, optimizer: "adam", pretrained: true, lr: 0.1 });
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
});
